// The ceiling of the serve benchmark's HTTP/1.1 rows: a server that does nothing but what the kernel and the client
// need. One thread, epoll; each request (counted by the blank line that ends its head, whatever it asks) is answered
// with the same bytes, a fixed head and one file's content, by one writev (the rest when the socket has room again). No parsing, no lookup, no Date per second.
// Its rate is what wrk and the loopback allow on the machine: a server at that rate cannot be made faster there.
//
// Usage: bench-ceiling PORT FILE [CONTENT-ENCODING]
// Built by scripts/bench-serve-peers.sh with `cc -O2`.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

// What each connection has read and not answered yet, and how much of the answer it is writing went out.
struct connection {
    unsigned int tail;  // the last bytes read, so that a blank line split between two reads is still seen
    int waiting;        // requests read and not yet answered
    size_t sent;        // bytes of the answer being written that went out (0: none being written)
    int watching_out;   // EPOLLOUT is asked for (only while the socket is full)
};

static struct connection connections[65536];
static struct iovec answer[2];
static size_t answer_length;

// Writes the answers the connection owes until they are all out (0) or the socket is full (1, wait for EPOLLOUT);
// -1 when the connection failed.
static int send_owed(int fd) {
    struct connection *c = &connections[fd];
    while (c->waiting > 0) {
        struct iovec left[2];
        int count = 0;
        size_t skip = c->sent;
        for (int i = 0; i < 2; i++) {
            if (skip >= answer[i].iov_len) {
                skip -= answer[i].iov_len;
                continue;
            }
            left[count].iov_base = (char *)answer[i].iov_base + skip;
            left[count].iov_len = answer[i].iov_len - skip;
            skip = 0;
            count++;
        }
        ssize_t n = writev(fd, left, count);
        if (n < 0) return (errno == EAGAIN || errno == EINTR) ? 1 : -1;
        c->sent += (size_t)n;
        if (c->sent == answer_length) {
            c->sent = 0;
            c->waiting--;
        }
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: bench-ceiling PORT FILE [CONTENT-ENCODING]\n");
        return 2;
    }
    int file = open(argv[2], O_RDONLY);
    struct stat info;
    if (file < 0 || fstat(file, &info) != 0) {
        perror(argv[2]);
        return 1;
    }
    size_t size = (size_t)info.st_size;
    char *body = malloc(size ? size : 1);
    if (read(file, body, size) != (ssize_t)size) {
        perror(argv[2]);
        return 1;
    }
    char head[512];
    int head_length = snprintf(head, sizeof head,
        "HTTP/1.1 200 OK\r\nServer: ceiling\r\nDate: Mon, 30 Nov 2026 12:00:00 GMT\r\nContent-Type: text/html\r\n"
        "%s%s%sContent-Length: %zu\r\nETag: \"ceiling\"\r\n\r\n",
        argc > 3 ? "Content-Encoding: " : "", argc > 3 ? argv[3] : "", argc > 3 ? "\r\n" : "", size);
    answer[0] = (struct iovec){head, (size_t)head_length};
    answer[1] = (struct iovec){body, size};
    answer_length = (size_t)head_length + size;

    int listener = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    int one = 1;
    setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[1])),
                                  .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (bind(listener, (struct sockaddr *)&address, sizeof address) != 0 || listen(listener, 1024) != 0) {
        perror("bind");
        return 1;
    }
    int poller = epoll_create1(0);
    struct epoll_event event = {.events = EPOLLIN, .data.fd = listener};
    epoll_ctl(poller, EPOLL_CTL_ADD, listener, &event);
    struct epoll_event ready[64];
    char bytes[16384];
    for (;;) {
        int count = epoll_wait(poller, ready, 64, -1);
        for (int i = 0; i < count; i++) {
            int fd = ready[i].data.fd;
            if (fd == listener) {
                int client;
                while ((client = accept4(listener, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
                    if (client >= 65536) {
                        close(client);
                        continue;
                    }
                    setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                    connections[client] = (struct connection){0};
                    struct epoll_event incoming = {.events = EPOLLIN, .data.fd = client};
                    epoll_ctl(poller, EPOLL_CTL_ADD, client, &incoming);
                }
                continue;
            }
            if (ready[i].events & EPOLLIN) {
                ssize_t got = read(fd, bytes, sizeof bytes);
                if (got == 0 || (got < 0 && errno != EAGAIN)) {
                    close(fd);
                    continue;
                }
                struct connection *c = &connections[fd];
                for (ssize_t j = 0; j < got; j++) {
                    c->tail = (c->tail << 8) | (unsigned char)bytes[j];
                    if (c->tail == 0x0d0a0d0a) c->waiting++;
                }
            }
            int state = send_owed(fd);
            if (state < 0) {
                close(fd);
                continue;
            }
            // Waits for room in the socket only while it is full (a system call only when that changes).
            if (state != connections[fd].watching_out) {
                connections[fd].watching_out = state;
                struct epoll_event wanted = {.events = EPOLLIN | (state ? EPOLLOUT : 0), .data.fd = fd};
                epoll_ctl(poller, EPOLL_CTL_MOD, fd, &wanted);
            }
        }
    }
}
