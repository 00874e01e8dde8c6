"""The dashboard: pages an operator watches and steers runs from (`/ui`)."""
