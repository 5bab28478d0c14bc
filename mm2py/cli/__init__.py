"""The command line: declares options, hands off to library code, renders results. No logic lives here."""
