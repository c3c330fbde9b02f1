import type { FastifyInstance } from 'fastify';
import { listNotifications, markRead } from '../../admin/notifications.js';
import type { Service } from '../../service.js';
import { principalOf } from '../auth.js';
import { route } from '../route.js';

/** The caller's own in-app notifications, for any role. */
export function notificationRoutes(app: FastifyInstance, svc: Service): void {
  route(app, 'listNotifications', async ({ query }, req) => listNotifications(svc.db.pool, principalOf(req).id, query));

  route(app, 'markNotificationRead', async ({ params: { id } }, req) => markRead(svc.db.pool, principalOf(req).id, id));
}
