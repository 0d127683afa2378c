"""Cost: a Plan priced as one training step (collectives forward, backward and mirrors; compute; memory-bound work) on a hardware profile."""
