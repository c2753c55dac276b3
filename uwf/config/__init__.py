"""What comes from outside: settings, the config file, the environment, secrets, input files."""
