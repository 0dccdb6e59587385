"""The command line: typer commands, the fast path of `estimate`, terminal tables."""
