"""Client-side recipes on kazoo."""
