"""Solvers the stages hand their problems to: bounded assignment as flows (`flow`), and
replica order and sets by integer programming (`exact_order`)."""
