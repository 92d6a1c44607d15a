"""Pictures: one style, the figures of acceptance and speed, the token view and the notebook widgets. Not: the numbers they draw (acceptance, cost)."""
