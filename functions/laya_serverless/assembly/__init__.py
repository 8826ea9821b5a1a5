"""The deployment floor: assembles the deployed checkpoints from the store (fetch, verify, load)
for the transports above; the Jev rules below it never load anything."""
