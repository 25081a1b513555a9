"""Fleet providers: where instances come from (EC2, this machine, a simulation)."""
