"""``millrace demo``: broker, order events, the Spark pipeline, and a verified summary."""
