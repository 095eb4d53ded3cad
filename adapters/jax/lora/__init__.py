"""Per-request LoRAs: merged on the device into a copy of the weights they change, for one run."""
