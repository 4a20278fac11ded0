# sim/: the simulator (filled in by the simulator work).
