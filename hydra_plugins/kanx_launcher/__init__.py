"""kanx launchers for Hydra: packing (local) and SLURM (submitit)."""
