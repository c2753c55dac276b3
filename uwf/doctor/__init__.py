"""`uwf doctor`: whether this machine and store are healthy, one check a line with a fix."""
