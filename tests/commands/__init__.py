"""The command line and its subcommands, slash commands, rewind and export."""
