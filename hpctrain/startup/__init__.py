"""Process start-up: what makes a CLI or trainer process start fast (questions asked ahead in
threads, compiled dataclass methods kept between processes, the cycle search paused while
importing) and debug lines without importing logging."""
