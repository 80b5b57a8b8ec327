"""Backups a user can restore: the archive, its encryption, verification, restore and the schedule."""
