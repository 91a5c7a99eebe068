"""What a plan means for the operator: figures and the text summary, waves, the duration estimate."""
