"""Delivery records: the durable state around a reply (recorded before it goes out, settled after), and the
slow notice a user gets while the answer is late."""
