"""SQLite storage: the driver, the schema and migrations, and the async database API."""

from teleton.storage.database import Database, StoreInfo, connect

__all__ = ["Database", "StoreInfo", "connect"]
