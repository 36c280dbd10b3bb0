"""A user package for the custom-task tests: a LightningModule and a LightningDataModule."""
