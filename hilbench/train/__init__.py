"""The host's training loop: estimators, q schedules, the trainer."""
