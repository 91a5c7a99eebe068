"""The simulated cluster: physics (the fluid copy model), the controller and the brokers it plays."""
