"""`python -m rhapsody` runs the command line."""

from rhapsody.cli import main

raise SystemExit(main())
