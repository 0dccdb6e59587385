"""One module per estimated quantity; each formula cites its source in its docstring."""
