"""The centre-point network (CenterNet's heads on a timm encoder): the box detector (`engine`, labelled boxes)
and the reader of characters (`characters`, labelled points)."""
