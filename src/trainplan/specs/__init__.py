"""The inputs as frozen, typed records that check themselves, and what every layer shares:
errors, units, labels and the data files' loader."""
