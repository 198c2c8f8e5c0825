package termination

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

var now = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

func pod(name string, mut ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
		Spec: corev1.PodSpec{NodeName: "node", TerminationGracePeriodSeconds: ptr.To[int64](30)}}
	for _, m := range mut {
		m(p)
	}
	return p
}

func daemon(p *corev1.Pod) {
	p.OwnerReferences = append(p.OwnerReferences, metav1.OwnerReference{Kind: "DaemonSet", Name: "ds", Controller: ptr.To(true)})
}
