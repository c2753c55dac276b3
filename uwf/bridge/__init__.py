"""The bridge: every event of the log published to an MQTT broker (`uwf bridge mqtt`),
resuming after restarts from the last seq the broker acknowledged."""
