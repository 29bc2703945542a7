"""A user's first week, journey by journey: data made by other tools, read with the tools' own defaults, one file a journey (issue 73)."""
