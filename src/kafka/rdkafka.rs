//! The production Kafka adapter on librdkafka (feature `rdkafka`). Not built yet: see issue 3.
