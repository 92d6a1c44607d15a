"""What one speculative step costs, in plain decode steps: from a deployment's own speeds, from a target's architecture, and fitted to measurements. Not: acceptance (acceptance)."""
