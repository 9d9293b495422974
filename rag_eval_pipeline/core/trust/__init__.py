"""How far to trust the judge: its agreement with a tenant's labels, and intervals corrected by them."""
