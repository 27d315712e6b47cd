"""Claim links: what ``is_claimable`` means. A project makes a link for a claimable product; a
person opens it (the JSON view or the HTML page) and claims one item with an email address."""
