"""The Avro schemas, shipped inside the package as schedulerstream.schemas (see setup.py)."""
