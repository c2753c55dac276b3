"""A whole store copied into an empty one (`uwf store copy SRC DST`): a folder to a
PostgreSQL database and back, the log line for line, the nodes it reaches, the views
rebuilt, the copy verified."""
