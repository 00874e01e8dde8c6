"""Push notifications: where they may go (`guard`) and how they get there (`deliverer`)."""
