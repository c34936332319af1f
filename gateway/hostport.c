/*
 * gateway/hostport.c: HOST:PORT addresses, as the configuration checks
 * them and the admin endpoint and `aagw status` use them.
 */
#include "gateway_int.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

const char *gw_split_hostport(const char *addr, char *host, size_t size) {
        const char *colon = strrchr(addr, ':');

        if (!colon || colon == addr || !colon[1])
                return NULL;
        if (addr[0] == '[') {
                if (colon < addr + 2 || colon[-1] != ']')
                        return NULL;
                snprintf(host, size, "%.*s", (int)(colon - addr - 2), addr + 1);
        } else
                snprintf(host, size, "%.*s", (int)(colon - addr), addr);
        return colon;
}

bool gw_host_is_loopback(const char *host) {
        struct in_addr  v4;
        struct in6_addr v6;

        if (!strcasecmp(host, "localhost"))
                return true;
        if (inet_pton(AF_INET, host, &v4) == 1)
                return (ntohl(v4.s_addr) >> 24) == 127;
        if (inet_pton(AF_INET6, host, &v6) == 1)
                return IN6_IS_ADDR_LOOPBACK(&v6) ||
                       (IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127);
        return false;
}
