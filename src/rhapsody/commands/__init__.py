"""What a person invokes: slash commands and the `rhapsody` subcommands (stats, strip, trust, import,
rewind, export), and custom commands from prompt files."""
