"""The command line: commands declared once, rendered to argparse."""
