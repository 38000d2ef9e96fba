"""Units of work in processes of their own: tasks, the queue, deadlines, the fork server, the running units and the scheduler."""
