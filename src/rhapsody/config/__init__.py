"""Settings: where the files are (`files`, light, read by the first frame) and the validated layers (`settings`)."""
