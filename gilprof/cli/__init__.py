"""One thin module per command: parse options, call the core, render."""
