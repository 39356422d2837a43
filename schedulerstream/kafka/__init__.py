"""Everything that talks to Kafka: the local broker, client configs, topics."""
