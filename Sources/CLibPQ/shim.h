#include <libpq-fe.h>
#ifdef __linux__
// The PostgreSQL listener waits with epoll (Swift's Glibc module does not carry it): see ListenerWait.swift.
#include <sys/epoll.h>
#endif
