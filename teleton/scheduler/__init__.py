"""Scheduled tasks (``tasks`` table) and the daemon's internal periodic jobs; see ``scheduler.py``."""

from teleton.scheduler.scheduler import Scheduler, SchedulerSettings
from teleton.scheduler.task_store import NewTask, TaskRecord, TaskStore

__all__ = ["NewTask", "Scheduler", "SchedulerSettings", "TaskRecord", "TaskStore"]
