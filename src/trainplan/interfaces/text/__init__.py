"""Words shared by the command line and the web page: phrasing of results, plans and hints."""
