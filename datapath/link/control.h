/* control.h - epoll tags shared by the main loop and the control socket. */
#ifndef CKCD_LINK_CONTROL_H
#define CKCD_LINK_CONTROL_H

#include "json.h"

enum ep_kind {
	EP_PORT_A,
	EP_PORT_B,
	EP_TIMER,
	EP_SIGNAL,
	EP_CONTROL_LISTEN,
	EP_CONTROL_CLIENT,
};

/* Every epoll registration points at a struct starting with this. */
struct ep_tag {
	int kind;
};

struct link;
/* One request line in, one reply line appended to out. */
void control_handle_line(struct link *l, char *line, struct jbuf *out);
/* Clients disconnected because they left too many replies unread. */
uint64_t control_clients_dropped_unread(void);

#endif
