"""Acting on a live run: the pure control rules, the controller applying them, and extra members while they pay."""
