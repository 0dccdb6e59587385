"""What people and programs use: the command line, the web server and page, and the words both show."""
